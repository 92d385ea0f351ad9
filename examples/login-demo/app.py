"""The demo app's entry point: registers a user from the command line.

Usage: python3 app.py register NAME PASSWORD
"""

import sys

import users


def main(argv):
    if len(argv) == 4 and argv[1] == "register":
        users.create_user(argv[2], argv[3])
        print(f"registered {argv[2]}")
        return 0
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
