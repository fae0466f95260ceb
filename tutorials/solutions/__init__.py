"""Reference solutions of the tutorial exercises, one module per exercise (same names as
``tutorials/exercises/``). The test suite runs every exercise test against them."""
