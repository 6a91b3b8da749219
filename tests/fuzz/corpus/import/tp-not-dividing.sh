# expect: tp x pp = 3 does not divide
--tensor-model-parallel-size 3
