module figures/walkcount

go 1.26
