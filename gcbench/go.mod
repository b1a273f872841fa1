module costlab/gcbench

go 1.22
