# expect: --recompute-modules: recompute module mla_up_proj needs latent attention (model.mla), which the model does not have
# args: --cluster dgx-a100-80g --nodes 1
--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --vocab-size 1000 \
  --recompute-granularity selective --recompute-modules core_attn mla_up_proj
