"""Loss, optimizer, and the jitted train/eval steps.

A packed row holds several stories (segments). Token t may attend to token s
only if s <= t and both are in the same segment; the target of token t is
token t+1 only if t+1 is in the same segment. Padding (segment 0) neither
attends, is attended to, nor is a target. Logits are cast to float32 before
the softmax cross-entropy; the loss is the mean over real targets of the
whole global batch. A format that trains only some tokens (a chat's
assistant turns) adds `loss_mask` to the batch: then a target counts only
where the mask holds 1 on the target token.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax

from trainers.gemma_jax import model as model_lib


def attention_mask(segment_ids: jax.Array) -> jax.Array:
    """[B, L, L] causal mask restricted to each segment."""
    length = segment_ids.shape[-1]
    causal = jnp.tril(jnp.ones((length, length), dtype=jnp.bool_))
    same = segment_ids[:, :, None] == segment_ids[:, None, :]
    real = (segment_ids != 0)[:, None, :]
    return causal[None] & same & real


def target_weights(segment_ids: jax.Array, loss_mask: jax.Array | None = None) -> jax.Array:
    """[B, L-1]: 1 where token t+1 is a real next token of token t (and a trained one, with a loss mask)."""
    nxt, cur = segment_ids[:, 1:], segment_ids[:, :-1]
    weights = ((nxt == cur) & (nxt != 0)).astype(jnp.float32)
    if loss_mask is not None:
        weights = weights * loss_mask[:, 1:].astype(jnp.float32)
    return weights


def loss_terms(model, params, batch):
    """(sum of token losses, number of target tokens), both float32."""
    tokens, seg = batch["tokens"], batch["segment_ids"]
    logits = model.apply(
        {"params": params},
        tokens,
        positions=batch["positions"],
        attention_mask=attention_mask(seg),
    ).logits
    ce = optax.softmax_cross_entropy_with_integer_labels(
        logits[:, :-1].astype(jnp.float32), tokens[:, 1:]
    )
    w = target_weights(seg, batch.get("loss_mask"))
    return jnp.sum(ce * w), jnp.sum(w)


def make_optimizer(learning_rate: float, warmup_steps: int) -> optax.GradientTransformation:
    """AdamW (as the GKE tutorial), gradient clipping, optional linear warmup; the
    rate is constant afterwards, as in the tutorial."""
    if warmup_steps:
        schedule = optax.warmup_constant_schedule(0.0, learning_rate, warmup_steps)
    else:
        schedule = learning_rate
    return optax.chain(
        optax.clip_by_global_norm(1.0),
        optax.adamw(learning_rate=schedule),
    )


def make_train_step(model, optimizer, lora: bool, state_shardings):
    """jit(step)(state, frozen, batch) -> (state, metrics); state is donated.

    The state holds the master weights (--master_dtype); the forward pass sees
    them cast to the model's dtype, and gradients flow back through the cast.
    """

    def loss_fn(trainable, frozen, batch):
        params = model_lib.merge_params(trainable, frozen, lora, model.dtype)
        total, count = loss_terms(model, params, batch)
        return total / jnp.maximum(count, 1.0), count

    def step(state, frozen, batch):
        (loss, count), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            state["params"], frozen, batch
        )
        updates, opt_state = optimizer.update(grads, state["opt_state"], state["params"])
        new_state = {
            "step": state["step"] + 1,
            "params": optax.apply_updates(state["params"], updates),
            "opt_state": opt_state,
        }
        metrics = {
            "loss": loss,
            "target_tokens": count,
            "real_tokens": jnp.sum(batch["segment_ids"] != 0),
            "grad_norm": optax.global_norm(grads),
        }
        return new_state, metrics

    return jax.jit(step, donate_argnums=(0,), out_shardings=(state_shardings, None))


def make_eval_step(model, lora: bool):
    """jit(eval)(params, frozen, batch) -> (loss sum, target count)."""

    @functools.partial(jax.jit)
    def step(trainable, frozen, batch):
        params = model_lib.merge_params(trainable, frozen, lora, model.dtype)
        return loss_terms(model, params, batch)

    return step


def init_state(params, optimizer, state_shardings, master_dtype):
    """The train state, created directly in its sharding."""

    def init(p):
        p = jax.tree.map(lambda x: x.astype(master_dtype), p)
        return {"step": jnp.zeros((), jnp.int32), "params": p, "opt_state": optimizer.init(p)}

    return jax.jit(init, out_shardings=state_shardings, donate_argnums=(0,))(params)


def abstract_state(abstract_params, optimizer):
    return jax.eval_shape(
        lambda p: {"step": jnp.zeros((), jnp.int32), "params": p, "opt_state": optimizer.init(p)},
        abstract_params,
    )
