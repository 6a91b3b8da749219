# expect: expected --nodes N (or torchrun --nnodes N in the command)
# args: --model llama2-7b --cluster dgx-a100-80g
--tensor-model-parallel-size 2
