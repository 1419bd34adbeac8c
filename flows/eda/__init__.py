"""Tool flows: Verilog generation, cocotb simulation, yosys/ABC synthesis with OpenSTA timing,
and gate-level power."""
