# expect: expected a positive integer
--pipeline-model-parallel-size two
