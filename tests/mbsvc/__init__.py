# mbsvc: the local Mainbrella service (an emulator of the hosted container API).
# Entry point: tests/localservice.py.  Standard library only.
