# expect: shell variables are not expanded
torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py $GPT_ARGS --bf16
