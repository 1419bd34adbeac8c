"""Shared pytest options: ``--seed`` reproduces a testbench run, ``--sim`` picks the simulator."""

import pytest


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=1, help="seed passed to every cocotb testbench")
    parser.addoption("--sim", default="icarus", choices=("icarus", "verilator"),
                     help="simulator for the cocotb testbenches")
    parser.addoption("--waves", action="store_true", help="dump waveforms of testbench runs")


@pytest.fixture
def tb_options(request):
    return {"seed": request.config.getoption("--seed"), "sim": request.config.getoption("--sim"),
            "waves": request.config.getoption("--waves")}
