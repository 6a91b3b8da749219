# expect: 2: --ddp-bucket-size: found '0', expected a positive integer
--ddp-bucket-size 0
