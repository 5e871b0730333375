# knights-tour worker image: Celery worker / beat with the solver backends.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install . && rm -rf /app/src /app/build

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin kt
USER kt
WORKDIR /home/kt
ENV KT_DATA_DIR=/home/kt/data
# Mount points of the compose volumes (reports, beat state): created here so the named volumes
# start out owned by kt, not root.
RUN mkdir -p /home/kt/data /home/kt/reports /home/kt/beat

CMD ["celery", "-A", "knights_tour.worker", "worker", "-Q", "knights_tour", "--loglevel=INFO"]
