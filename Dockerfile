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

CMD ["celery", "-A", "knights_tour.worker", "worker", "-Q", "knights_tour", "--loglevel=INFO"]
