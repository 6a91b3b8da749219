# expect: did you mean '--tensor-model-parallel-size'
--tensor-model-paralel-size 2 \
  --bf16
