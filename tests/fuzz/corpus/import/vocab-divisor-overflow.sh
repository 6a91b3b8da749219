# expect: --make-vocab-size-divisible-by 9223372036854775808: padding the vocabulary (32000) to a multiple of it times the tensor-parallel size (2) overflows 64 bits
# args: --cluster dgx-a100-80g --nodes 1
--tensor-model-parallel-size 2 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096
--micro-batch-size 1 --global-batch-size 8 --vocab-size 32000 --make-vocab-size-divisible-by 9223372036854775808
