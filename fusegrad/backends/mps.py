"""``torch.backends.mps``: no Metal device here."""


def is_available() -> bool:
    return False


def is_built() -> bool:
    return False
