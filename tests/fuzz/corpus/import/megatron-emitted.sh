# Megatron-LM launch for tiny-llama-2x2x2: tiny-llama on 1 x dgx-a100-80g (8 GPUs), grid dp=2 pp=2 tp=2, full_shard
# placeholders: add your data and tokenizer flags (--data-path, --tokenizer-type, ...) and the optimizer's (--lr, --train-iters, ...)
# note: sharding full_shard is written as Megatron-FSDP --data-parallel-sharding-strategy optim_grads_params (gridstep schedules both alike; it reads back as zero3)
torchrun --standalone --nnodes 1 --nproc_per_node 8 pretrain_gpt.py \
    --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 \
    --num-layers 4 \
    --hidden-size 256 \
    --num-attention-heads 4 \
    --group-query-attention --num-query-groups 2 \
    --ffn-hidden-size 688 \
    --seq-length 128 --max-position-embeddings 128 \
    --vocab-size 1024 --make-vocab-size-divisible-by 128 \
    --swiglu \
    --normalization RMSNorm \
    --position-embedding-type rope \
    --untie-embeddings-and-output-weights \
    --disable-bias-linear \
    --attention-dropout 0 --hidden-dropout 0 \
    --attention-backend flash \
    --micro-batch-size 2 \
    --global-batch-size 8 \
    --use-custom-fsdp --data-parallel-sharding-strategy optim_grads_params --no-gradient-accumulation-fusion \
    --use-distributed-optimizer \
    --ddp-bucket-size 13107200 \
    --grad-reduce-in-bf16 \
    --bf16
