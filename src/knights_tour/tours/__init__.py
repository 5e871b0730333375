"""The knight's tour and its record: what a job's outcome is, how it is checked and stored.

Owns the record (:mod:`.record`: ``TourResult``/``Record``, ``Status``, ``Proof`` and its JSON
form), the verifier that checks a tour against the definition alone (:mod:`.verify`), the
record's compact stored form (:mod:`.stored`: MessagePack, three bits a move), a page of stored
records made into output (:mod:`.pages`) by a compiled walk of the stored moves
(:mod:`.tour_text`), and their fields read out as columns for Parquet (:mod:`.stored_columns`).

May import: the ground floor (``board``, ``errors``, ``settings``, ``_numba``). Never Celery,
Redis, click or rich.
"""
