"""DistributedOptimizer: Horovod's, with frugal's strategies behind it.

The wrapped optimizer's class is kept (the result is an instance of a subclass of it), so
learning-rate schedulers and state_dict() work as before. A hook on each parameter's gradient
accumulator submits the gradient to frugal's engine as soon as backward has produced it for the
last of `backward_passes_per_step` passes; step() waits for the averages, writes them into the
gradients, runs the wrapped optimizer and then the strategy's own exchange, if it has one (the
model average of Local SGD).
"""

import warnings
from contextlib import contextmanager

import torch

from frugal import _frugal
from frugal.torch import mpi_ops
from frugal.torch.compression import Compression
from frugal.torch.deferred import DeferredUpdates
from frugal.torch.mpi_ops import Adasum, Average, Sum


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 frugal_options):
        super(self.__class__, self).__init__(params)
        if backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step must be at least 1")
        if op not in (Average, Sum):
            raise ValueError("op must be frugal.torch.Average or frugal.torch.Sum")
        all_params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is None:
            named = [("param.%d.%d" % (i, j), p) for i, group in enumerate(self.param_groups)
                     for j, p in enumerate(group["params"])]
        else:
            named = list(named_parameters)
            if any(not isinstance(pair, tuple) or len(pair) != 2 for pair in named):
                raise ValueError("named_parameters should be a sequence of (name, parameter) "
                                 "tuples, as model.named_parameters() gives")
            names = [n for n, _ in named]
            if len(set(names)) != len(names):
                dups = sorted({n for n in names if names.count(n) > 1})
                raise ValueError("parameter names are not unique: %s" % ", ".join(dups))
            known = {id(p) for _, p in named}
            unnamed = [p for p in all_params if id(p) not in known]
            if unnamed:
                raise ValueError("named_parameters was given, but %d parameter(s) of the "
                                 "optimizer are not in it" % len(unnamed))
            in_optimizer = {id(p) for p in all_params}
            named = [(n, p) for n, p in named if id(p) in in_optimizer]
        self._params = [(n, p) for n, p in named if p.requires_grad]
        for n, p in self._params:
            if p.dtype != torch.float32 or p.device.type != "cpu":
                raise ValueError("'%s': frugal exchanges float32 CPU parameters, not %s on %s"
                                 % (n, p.dtype, p.device))
        self._op = op
        self._passes = backward_passes_per_step
        options = dict(frugal_options)
        defer = options.pop("defer_updates")
        if compression is not Compression.none and compression.spec:
            if options["compress"] and options["compress"] != compression.spec:
                raise ValueError("compression=%s and compress=%r contradict each other"
                                 % (compression.__name__, options["compress"]))
            options["compress"] = compression.spec
        group = self.param_groups[0] if self.param_groups else {}
        options["momentum"] = float(group.get("momentum", 0.0) or 0.0)
        options["nesterov"] = bool(group.get("nesterov", False))
        self._exchange = _frugal.make_exchange(
            mpi_ops._rt(), [n for n, _ in self._params],
            [list(p.shape) for _, p in self._params], options)
        # DGC and worker momentum take the optimizer's momentum over.
        if "momentum" in group and self._exchange.optimizer_momentum != options["momentum"]:
            for g in self.param_groups:
                g["momentum"] = self._exchange.optimizer_momentum
                g["nesterov"] = self._exchange.optimizer_nesterov
        self._size = mpi_ops.size()
        self._step_count = 0
        self._begun = False
        self._exchange_now = None
        self._delay = [self._passes] * len(self._params)
        self._submitted = [False] * len(self._params)
        self._should_synchronize = True
        self._synchronized = False
        self._grad_accs = []
        self._deferred = None
        if defer:
            if options["sync"] != "bsp":
                raise ValueError("defer_updates=True needs sync=\"bsp\" (the strategy exchanges "
                                 "no parameters after a step), not %r" % options["sync"])
            self._deferred = DeferredUpdates(self, self._params, self._exchange.wait)
        if not self._exchange.submits_after_backward:
            for i, (_, p) in enumerate(self._params):
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._make_hook(i))
                self._grad_accs.append(acc)

    # The strategy's view of this step.
    def _exchanges(self):
        if self._exchange_now is None:
            self._exchange_now = self._exchange.averages_gradients(self._step_count)
        return self._exchange_now

    def _make_hook(self, i):
        def hook(*ignore):
            if self._delay[i] <= 0:
                raise AssertionError(
                    "Gradients were computed more than backward_passes_per_step times before "
                    "call to step(). Increase backward_passes_per_step to accumulate gradients "
                    "locally.")
            if self._deferred is not None and self._deferred.is_pending(i):
                raise RuntimeError(
                    "'%s' was used by a forward pass before its deferred update: a module used it "
                    "without calling the forward of a module that owns it; use "
                    "defer_updates=False" % self._params[i][0])
            self._delay[i] -= 1
            if self._delay[i] == 0 and self._exchanges():
                self._submit(i)
        return hook

    def _submit(self, i):
        name, p = self._params[i]
        if p.grad is None:
            # Another rank may have a gradient for it: this rank contributes zeros.
            p.grad = torch.zeros_like(p)
        if not p.grad.is_contiguous():
            p.grad = p.grad.contiguous()
        self._exchange.submit(i, p.grad, self._step_count)
        self._submitted[i] = True

    def synchronize(self):
        """Waits for the averaged gradients and writes them into the parameters' gradients."""
        self._submit_rest()
        if self._exchanges():
            self._exchange.wait_all()
            self._scale([p.grad for _, p in self._params])
        self._reset_submissions()
        self._synchronized = True

    def _submit_rest(self):
        """Submits the gradients no hook has submitted (all of them with overlap none)."""
        if self._deferred is not None:
            self._deferred.finish()
        if self._exchanges():
            for i in range(len(self._params)):
                if not self._submitted[i]:
                    self._submit(i)

    def _scale(self, grads):
        """The averages as op asks: Average is what the engine gives, Sum multiplies."""
        if self._op == Sum:
            with torch.no_grad():
                for g in grads:
                    g.mul_(self._size)

    def _reset_submissions(self):
        self._delay = [self._passes] * len(self._params)
        self._submitted = [False] * len(self._params)

    @contextmanager
    def skip_synchronize(self):
        """step() inside this block does not synchronize (call synchronize() yourself first)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def _tensors(self):
        params = [p.data for _, p in self._params]
        momenta = [self.state.get(p, {}).get("momentum_buffer") for _, p in self._params]
        if any(m is None for m in momenta):
            momenta = []
        return params, momenta

    def step(self, closure=None):
        if self._deferred is not None:
            return self._step_deferred(closure)
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        if not self._begun:
            self._exchange.begin(*self._tensors())
            self._begun = True
        loss = super(self.__class__, self).step(closure)
        self._exchange.after_step(self._step_count, *self._tensors())
        self._step_count += 1
        self._exchange_now = None
        return loss

    def _step_deferred(self, closure):
        if closure is not None:
            raise ValueError("defer_updates=True does not take a closure in step()")
        averaged_here = self._should_synchronize and not self._synchronized
        if averaged_here:
            self._submit_rest()
            self._reset_submissions()
        self._synchronized = False
        # synchronize() called by hand has scaled them already.
        scale = self._scale if averaged_here and self._exchanges() else (lambda grads: None)
        if not self._begun:
            self._exchange.begin(*self._tensors())
            self._begun = True
        # Already averaged (synchronize() was called) or still on their way: applied before the
        # next forward pass of their module, or at the latest by the next step().
        self._deferred.defer(scale)
        self._step_count += 1
        self._exchange_now = None
        return None

    def _step_wrapped(self):
        return super(self.__class__, self).step()

    def finish_updates(self):
        """With defer_updates=True: applies the updates still waiting for a forward pass (before
        reading the parameters outside one: saving, evaluating by hand, comparing replicas)."""
        if self._deferred is not None:
            self._deferred.finish()

    def state_dict(self, *args, **kwargs):
        self.finish_updates()
        return super(self.__class__, self).state_dict(*args, **kwargs)

    def zero_grad(self, *args, **kwargs):
        if any(self._submitted):
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)

    @property
    def frugal_strategy(self):
        """The strategy, as frugal names it ("bsp", "local:period=4", ...)."""
        return self._exchange.strategy

    @property
    def frugal_reducer(self):
        """The reducer of the gradients ("allreduce:ring", a compressor's name, ...)."""
        return self._exchange.reducer


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         *, compress="", ef=False, worker_momentum=False, aggregate="auto",
                         compress_min_bytes=65536, overlap="fusion", fusion="cycle",
                         arch="allreduce:ring", sync="bsp", steps_per_epoch=0, seed=0,
                         defer_updates=False):
    """Wraps `optimizer` so that each step applies the gradients averaged over the ranks
    (collective: every rank creates it at the same point).

    Horovod's arguments keep their meaning (op=Sum sums; Compression.fp16 is frugal's fp16
    compressor). frugal's: ``compress`` a compressor spec ("topk:ratio=0.01", ...), ``ef`` error
    feedback, ``worker_momentum``, ``aggregate``, ``compress_min_bytes``; ``overlap`` none, wfbp,
    fusion or priority and ``fusion`` cycle (Horovod's) or mgwfbp; ``arch`` "allreduce[:ALGO]"; ``sync``
    "bsp" or "local:period=H,..."; ``steps_per_epoch`` for options counted in epochs;
    ``defer_updates`` (with sync="bsp") step() does not wait for the averages: each parameter's
    update runs just before the next forward pass of its module, as `frugal train --overlap
    priority` does (see ``finish_updates()``). A
    combination frugal refuses raises ValueError with the line `frugal train` prints for it.
    """
    if op == Adasum:
        raise ValueError("op=Adasum is not available in frugal; use Average or Sum")
    if gradient_predivide_factor != 1.0:
        raise ValueError("gradient_predivide_factor is not available in frugal")
    options = dict(compress=compress or "", ef=bool(ef), worker_momentum=bool(worker_momentum),
                   aggregate=aggregate, compress_min_bytes=int(compress_min_bytes),
                   overlap=overlap, fusion=fusion, arch=arch, sync=sync,
                   steps_per_epoch=int(steps_per_epoch), seed=int(seed), skip_comm=False,
                   defer_updates=bool(defer_updates))
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, options)
