# expect: found 'yes', expected a --flag
--bf16 yes
