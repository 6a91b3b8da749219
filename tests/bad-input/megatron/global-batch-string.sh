# expect: 2: --global-batch-size: found 'all', expected a positive integer
--global-batch-size all
