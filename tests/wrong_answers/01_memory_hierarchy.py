"""Notebook 01: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex1_5", label="a plain shuffle (Fisher-Yates): a random permutation, usually of several cycles", source='''
import random


def single_cycle_permutation(n: int, seed: int) -> list[int]:
    """A random permutation of range(n) that is one cycle through all n positions, drawn with its own seeded generator."""
    rng = random.Random(seed)
    p = list(range(n))
    rng.shuffle(p)
    return p
'''),
    Wrong(cell="ex1_5", label="Sattolo's algorithm on the global generator, reseeded", source='''
import random


def single_cycle_permutation(n: int, seed: int) -> list[int]:
    """A random permutation of range(n) that is one cycle through all n positions, drawn with its own seeded generator."""
    random.seed(seed)
    p = list(range(n))
    for i in range(n - 1, 0, -1):
        j = random.randrange(i)
        p[i], p[j] = p[j], p[i]
    return p
'''),
]
