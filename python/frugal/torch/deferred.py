"""Updates deferred into the next forward pass (`DistributedOptimizer(..., defer_updates=True)`).

`frugal train --overlap priority` does not wait for every average at the end of a step: the
update of a layer runs just before the next forward pass reaches that layer, so the averages of
the layers near the output keep travelling while the first layers compute. This is the same for
a Python optimizer. step() takes the step's averaged gradients over (the parameters' `.grad`
becomes None, so zero_grad() and the next backward cannot touch them) and keeps, per parameter,
the hyperparameters of its group at that moment (a learning-rate scheduler stepping right after
step() changes the next step, not this one). A forward pre-hook on every module waits for the
averages of that module's own parameters and runs the wrapped optimizer's step on them alone.
Whatever no forward pass reached by then is applied at the next step(), by finish(), and before
the optimizer's state_dict() is taken.

The wrapped optimizer must update each parameter from its own gradient and state only (SGD,
Adam, RMSprop, ...: PyTorch's per-parameter optimizers); closures are refused.
"""

import weakref

import torch


class DeferredUpdates:
    def __init__(self, optimizer, params, wait):
        """`params`: the (name, parameter) pairs the exchange carries, in its order; `wait`
        waits for the averages of a list of their indices."""
        self._opt = weakref.ref(optimizer)
        self._params = params
        self._index = {id(p): i for i, (_, p) in enumerate(params)}
        self._wait = wait
        self._pending = {}  # index -> (averaged gradient, group, the group's hyperparameters)
        self._hook = torch.nn.modules.module.register_module_forward_pre_hook(self._before_forward)

    def close(self):
        self._hook.remove()

    def is_pending(self, index):
        return index in self._pending

    def defer(self, post_wait):
        """At step(): this step's gradients (submitted, perhaps still averaging) become pending
        updates. `post_wait(grads)` runs on the averaged gradients once they are waited for."""
        opt = self._opt()
        group_of = {}
        for group in opt.param_groups:
            hyper = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                group_of[id(p)] = (group, hyper)
        self._post_wait = post_wait
        for i, (_, p) in enumerate(self._params):
            if p.grad is None:
                continue
            group, hyper = group_of[id(p)]
            self._pending[i] = (p.grad, group, hyper)
            p.grad = None

    def finish(self):
        """Applies every pending update."""
        self._apply(sorted(self._pending))

    def _before_forward(self, module, inputs):
        if not self._pending or self._opt() is None:
            return
        indices = [self._index[id(p)] for p in module._parameters.values()
                   if p is not None and id(p) in self._index]
        indices = [i for i in indices if i in self._pending]
        if indices:
            self._apply(indices)

    def _apply(self, indices):
        if not indices:
            return
        opt = self._opt()
        self._wait(indices)
        grads = [self._pending[i][0] for i in indices]
        self._post_wait(grads)
        # One step of the wrapped optimizer per group, over these parameters only, with the
        # group's hyperparameters of the step that produced the gradients.
        by_group = {}
        for i in indices:
            grad, group, hyper = self._pending.pop(i)
            by_group.setdefault(id(group), (group, hyper, []))[2].append((self._params[i][1], grad))
        saved_groups = opt.param_groups
        with torch.no_grad():
            for group, hyper, pairs in by_group.values():
                saved_grads = [p.grad for p, _ in pairs]
                for p, g in pairs:
                    p.grad = g
                subset = dict(hyper)
                subset["params"] = [p for p, _ in pairs]
                opt.param_groups = [subset]
                try:
                    opt._step_wrapped()
                finally:
                    opt.param_groups = saved_groups
                    for (p, _), g in zip(pairs, saved_grads):
                        p.grad = g
