# expect: --moe-flex-dispatcher-backend: found ncclep, expected deepep or hybridep
--num-experts 8 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend ncclep
