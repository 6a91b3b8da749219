# expect: --moe-token-dispatcher-type: found allgather (Megatron-LM's default), expected alltoall
--num-experts 8
