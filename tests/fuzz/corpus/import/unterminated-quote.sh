# expect: unterminated double quote
--data-path "/data/my corpus
