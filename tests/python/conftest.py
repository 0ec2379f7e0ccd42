"""Every test of this directory runs on every rank of an mpirun job (ctest starts it): a test is
a collective, and the ranks run the tests in the same order."""

import os

import pytest


@pytest.fixture(scope="session")
def hvd():
    import frugal.torch as hvd

    hvd.init(timeout=20)
    yield hvd


def expected_size():
    return int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
