# expect: 2: --tensor-model-parallel-size: found '0', expected a positive integer
--tensor-model-parallel-size 0
