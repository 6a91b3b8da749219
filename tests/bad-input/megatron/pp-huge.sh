# expect: 2: --pipeline-model-parallel-size: found '18446744073709551616', expected a positive integer
--pipeline-model-parallel-size 18446744073709551616
