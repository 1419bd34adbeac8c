"""cocotb testbenches: each drives a unit's generated Verilog and checks it against golden/."""
