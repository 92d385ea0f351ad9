"""A tiny in-memory user store for the demo app.

Passwords are never stored: only a random salt and a PBKDF2-SHA256 digest.
"""

import hashlib
import os

_ITERATIONS = 100_000
_USERS = {}


def hash_password(password, salt=None):
    """Returns (salt, digest) for the password; a new random salt unless one is given."""
    if salt is None:
        salt = os.urandom(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, _ITERATIONS)
    return salt, digest


def create_user(username, password):
    """Adds a user. Raises ValueError for an empty name, a short password or a duplicate."""
    if not username:
        raise ValueError("username must not be empty")
    if len(password) < 8:
        raise ValueError("password must have at least 8 characters")
    if username in _USERS:
        raise ValueError(f"user {username!r} already exists")
    _USERS[username] = hash_password(password)


def get_user(username):
    """Returns (salt, digest) for the user, or None."""
    return _USERS.get(username)


def reset():
    """Removes every user (for tests)."""
    _USERS.clear()
