# expect: 2: --micro-batch-size: found '0', expected a positive integer
--micro-batch-size 0
