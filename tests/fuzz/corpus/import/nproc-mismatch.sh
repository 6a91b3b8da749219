# expect: launcher --nproc_per_node: found 4, expected 8
torchrun --nnodes 1 --nproc_per_node 4 pretrain_gpt.py \
  --bf16
