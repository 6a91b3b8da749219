# expect: context parallelism is not modelled
--tensor-model-parallel-size 2 --context-parallel-size 2
