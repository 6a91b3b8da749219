# expect: --moe-layer-freq: found '([0]*1+[1]*2)*10+[0]*2', expected an int k (a MoE block every k) or a pattern
--num-experts 8 --moe-token-dispatcher-type alltoall --moe-layer-freq '([0]*1+[1]*2)*10+[0]*2'
