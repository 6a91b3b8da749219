# expect: --moe-router-num-groups: found it alone, expected --moe-router-num-groups and --moe-router-group-topk together
--num-experts 8 --moe-router-num-groups 4
