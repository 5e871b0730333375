"""``python -m knights_tour`` runs the ``ktour`` command line."""

from knights_tour.console import run

run()
