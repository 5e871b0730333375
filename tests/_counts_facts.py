"""Published tour counts that the count tests check against (facts from outside the code)."""

OEIS_5X5 = [
    [304, 0, 56, 0, 304],
    [0, 56, 0, 56, 0],
    [56, 0, 64, 0, 56],
    [0, 56, 0, 56, 0],
    [304, 0, 56, 0, 304],
]
"""Directed open knight's tours from each square of 5x5 (row 0 at the top); they sum to
OEIS A165134(5) = 1728, and the 12 minority-colour squares have none (colour parity)."""
