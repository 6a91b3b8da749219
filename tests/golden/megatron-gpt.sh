# A Megatron-LM launch for a GPT-2-shaped 1.3B model on two 8-GPU nodes (TP2 x PP2 x DP4),
# as a launch script holds it: launcher, model shape, parallelism, training and data flags.
torchrun --nnodes 2 --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint $MASTER_ADDR:29500 \
    pretrain_gpt.py \
    --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 \
    --sequence-parallel \
    --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \
    --seq-length 2048 --max-position-embeddings 2048 \
    --vocab-size 50257 \
    --micro-batch-size 4 --global-batch-size 256 \
    --recompute-activations \
    --use-distributed-optimizer --overlap-grad-reduce \
    --lr 2.0e-4 --min-lr 2.0e-5 --lr-decay-style cosine --train-iters 500000 \
    --weight-decay 0.1 --clip-grad 1.0 \
    --data-path 0.7 /data/web_text_document 0.3 /data/books_text_document \
    --tokenizer-type GPT2BPETokenizer --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt \
    --save /ckpt --load /ckpt --log-interval 10 \
    --bf16
