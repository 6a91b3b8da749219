#!/bin/bash
# A launch script in the shape of Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh
# (written for this test, not copied): GPT-3 175B as TP8 x PP16, the flags in bash arrays, the
# paths from the script's arguments, the node count in a variable to edit.

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
# edit for more nodes
MASTER_ADDR=localhost
MASTER_PORT=6000
NUM_NODES=1
NODE_RANK=0
WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))

CKPT_DIR=$1 # where checkpoints go
TB_DIR=$2 # tensorboard logs
VOCAB_JSON=$3 # gpt2-vocab.json
MERGES_TXT=$4 # gpt2-merges.txt
DATA_PREFIX=$5 # <prefix>_text_document

LAUNCHER_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)

MODEL_ARGS=(
    --num-layers 96
    --hidden-size 12288
    --num-attention-heads 96
    --seq-length 2048
    --max-position-embeddings 2048
    --attention-backend auto # flash, fused, unfused or local also work
)

TRAIN_ARGS=(
    --micro-batch-size 1
    --global-batch-size 1536
    --step-batch-size-schedule "0:16 2.4B:320 4.8B:624 7.2B:928 9.6B:1232 12B:1536"
    --train-iters 500000
    --weight-decay 0.1
    --adam-beta1 0.9
    --adam-beta2 0.95
    --init-method-std 0.006
    --clip-grad 1.0
    --fp16
    --lr 6.0e-5
    --lr-decay-style cosine
    --min-lr 6.0e-6
    --lr-warmup-fraction .001
    --lr-decay-iters 430000
)

PARALLEL_ARGS=(
	--tensor-model-parallel-size 8
	--pipeline-model-parallel-size 16
)

DATA_ARGS=(
    --data-path $DATA_PREFIX
    --vocab-file $VOCAB_JSON
    --merge-file $MERGES_TXT
    --split 949,50,1
)

LOG_ARGS=(
    --log-interval 100
    --save-interval 10000
    --eval-interval 1000
    --save $CKPT_DIR
    --load $CKPT_DIR
    --eval-iters 10
    --tensorboard-dir $TB_DIR
)

torchrun ${LAUNCHER_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAIN_ARGS[@]} \
    ${PARALLEL_ARGS[@]} \
    ${DATA_ARGS[@]} \
    ${LOG_ARGS[@]}
