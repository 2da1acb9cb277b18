"""Reading Nsight Systems exports: the schema by looking, ranges and GPU work, names for numbers, the sweep that attributes work to ranges."""
