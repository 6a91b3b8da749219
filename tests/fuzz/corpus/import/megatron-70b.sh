# Megatron-LM launch for seed-70b-64xa100: llama2-70b on 8 x dgx-a100-80g (64 GPUs), grid dp=4 pp=2 tp=8, full_shard
# run on every node with MASTER_ADDR = the first node's address (placeholder)
# placeholders: add your data and tokenizer flags (--data-path, --tokenizer-type, ...) and the optimizer's (--lr, --train-iters, ...)
# note: sharding full_shard is written as Megatron-FSDP --data-parallel-sharding-strategy optim_grads_params (gridstep schedules both alike; it reads back as zero3)
torchrun --nnodes 8 --nproc_per_node 8 --rdzv_id gridstep --rdzv_backend c10d --rdzv_endpoint $MASTER_ADDR:29500 pretrain_gpt.py \
    --tensor-model-parallel-size 8 \
    --pipeline-model-parallel-size 2 \
    --use-tp-pp-dp-mapping \
    --num-layers 80 \
    --hidden-size 8192 \
    --num-attention-heads 64 \
    --group-query-attention --num-query-groups 8 \
    --ffn-hidden-size 28672 \
    --seq-length 4096 --max-position-embeddings 4096 \
    --vocab-size 32000 --make-vocab-size-divisible-by 1 \
    --swiglu \
    --normalization RMSNorm \
    --position-embedding-type rope \
    --untie-embeddings-and-output-weights \
    --disable-bias-linear \
    --attention-dropout 0 --hidden-dropout 0 \
    --attention-backend flash \
    --micro-batch-size 1 \
    --global-batch-size 1024 \
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 \
    --use-custom-fsdp --data-parallel-sharding-strategy optim_grads_params --no-gradient-accumulation-fusion \
    --use-distributed-optimizer \
    --ddp-bucket-size 13107200 \
    --grad-reduce-in-bf16 \
    --bf16
