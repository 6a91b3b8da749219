# expect: expected a divisor of the 16 layers per stage
--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 5
