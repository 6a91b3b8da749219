# expect: a variable or command the script does not set
torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py $GPT_ARGS --bf16
