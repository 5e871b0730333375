"""output layer of knights_tour (see docs/architecture.md)."""
