# expect: --micro-batch-size: found no value
--bf16 \
  --micro-batch-size
