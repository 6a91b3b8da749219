# expect: gridstep recomputes every layer of a stage or none
--pipeline-model-parallel-size 2 \
  --recompute-granularity full --recompute-method block --recompute-num-layers 2
