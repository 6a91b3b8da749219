#!/usr/bin/env python3
"""Lists Megatron-LM's command-line arguments as engine/megatron_args.tsv holds them.

usage: python3 tests/megatron_args.py MEGATRON_LM_CHECKOUT > engine/megatron_args.tsv

Builds the parser of megatron/training/arguments.py (add_megatron_arguments: the argparse groups
and the flags ArgumentGroupFactory generates from the config dataclasses) without Megatron's
dependencies: every module that is neither Megatron's nor Python's own is replaced by a
permissive stand-in whose version checks pass, so that every optional group is added. Prints a
header naming the checkout's commit, then one line per long option:
NAME, DEST, ARITY (0 switch, 1 one value, N values, + one or more, * any, ? optional), KIND
(true / false for store_true / store_false switches, const, value), DEFAULT (Python repr for
None, bools, numbers, strings and lists of them, else ?), tab-separated, sorted by name."""
import argparse
import importlib.abc
import importlib.machinery
import subprocess
import sys
import types
import typing


class _Meta(type(typing.Protocol)):
    def __getattr__(cls, n):
        if n.startswith('__') and n.endswith('__') or n.startswith('_abc') or n.startswith('_is_'):
            raise AttributeError(n)
        return _Any()

    def __hash__(cls):
        return id(cls)

    def __or__(cls, o):
        return cls

    def __ror__(cls, o):
        return cls


class _Any(metaclass=_Meta):
    """Stands for any object of a replaced module: callable, indexable, comparable."""

    def __init__(self, *a, **k):
        pass

    def __getattr__(self, n):
        if n.startswith('__') and n.endswith('__'):
            raise AttributeError(n)
        return _Any()

    def __call__(self, *a, **k):
        return _Any()

    def __getitem__(self, k):
        return _Any()

    def __class_getitem__(cls, k):
        return cls

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __lt__(self, o):
        return False

    __le__ = __lt__

    def __ge__(self, o):  # version checks (x >= minimum) pass
        return True

    __gt__ = __ge__

    def __eq__(self, o):
        return False

    def __hash__(self):
        return id(self)

    def __int__(self):
        return 0

    __index__ = __int__

    def __float__(self):
        return 0.0

    def __or__(self, o):
        return self

    __ror__ = __or__


class _Module(types.ModuleType):
    __path__ = []

    def __call__(self, *a, **k):
        return _Any()

    def __getitem__(self, k):
        return self

    def __or__(self, o):
        return self

    __ror__ = __or__

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __lt__(self, o):
        return False

    __le__ = __lt__

    def __ge__(self, o):
        return True

    __gt__ = __ge__

    def __hash__(self):
        return id(self)

    def __getattr__(self, name):
        if name.startswith('__') and name.endswith('__'):
            raise AttributeError(name)
        v = type(name, (_Any,), {}) if name[:1].isupper() else _Module(self.__name__ + '.' + name)
        setattr(self, name, v)
        return v


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Replaces every module that no other finder can load, except Megatron's and the stdlib's."""

    KEEP = {'megatron', 'org', 'java', 'android'}

    def find_spec(self, name, path, target=None):
        top = name.split('.')[0]
        if top in self.KEEP or top in sys.stdlib_module_names:
            return None
        for f in sys.meta_path:
            if f is self:
                continue
            try:
                if f.find_spec(name, path, target) is not None:
                    return None
            except Exception:
                pass
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        m = _Module(spec.name)
        m.__version__ = '99.0.0'
        return m

    def exec_module(self, module):
        pass


def _arity(a):
    if isinstance(a, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction,
                      argparse._CountAction)) or a.nargs == 0:
        return '0'
    return '1' if a.nargs is None else str(a.nargs)


def _kind(a):
    return {argparse._StoreTrueAction: 'true', argparse._StoreFalseAction: 'false',
            argparse._StoreConstAction: 'const'}.get(type(a), 'value')


def _default(d):
    if d is None or isinstance(d, (bool, int, float, str)):
        return repr(d).replace('\t', ' ')
    if isinstance(d, (list, tuple)) and all(isinstance(x, (int, float, str)) for x in d):
        return repr(list(d))
    return '?'


def main():
    root = sys.argv[1]
    if not hasattr(typing, 'override'):
        typing.override = lambda f: f  # typing.override is Python 3.12's
    sys.meta_path.append(_Finder())
    sys.path.insert(0, root)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # Megatron's modules print while they load
    from megatron.training import arguments
    parser = arguments.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    sys.stdout = real_stdout
    try:
        commit = subprocess.run(['git', '-C', root, 'log', '-1', '--format=%H %cs'], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = 'unknown'
    rows = {}
    for a in parser._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        for o in a.option_strings:
            if o.startswith('--'):
                rows[o[2:]] = (a.dest, _arity(a), _kind(a), _default(a.default))
    print('# Megatron-LM command-line arguments: NAME DEST ARITY KIND DEFAULT, tab-separated (see')
    print('# tests/megatron_args.py). ARITY: 0 switch, N values, + one or more, * any, ? optional.')
    print('# KIND: true / false (store_true / store_false switches), const, value.')
    print('# source: NVIDIA/Megatron-LM %s megatron/training/arguments.py' % commit)
    for n in sorted(rows):
        print('\t'.join((n,) + rows[n]))


if __name__ == '__main__':
    main()
