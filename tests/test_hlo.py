"""Lowering jaxprs to HLO and XLA-style HLO text."""
import numpy as np

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.hlo import Shape, lower_jaxpr
from minixla.hlo.lowering import conv_dim_labels, parse_dim_labels
from conftest import filecheck

f32 = np.float32


def hlo_text(f, *args):
    return minixla.jit(f).lower(*args).as_text()


def test_add_module_exact_text():
    text = hlo_text(lambda a, b: a + b, np.ones((8, 3), f32), np.ones(3, f32))
    assert text == (
        "HloModule jit_lambda\n\n"
        "ENTRY %main.0 (p0: f32[8,3], p1: f32[3]) -> f32[8,3] {\n"
        "  %p0 = f32[8,3]{1,0} parameter(0)\n"
        "  %p1 = f32[3]{0} parameter(1)\n"
        "  %broadcast.1 = f32[8,3]{1,0} broadcast(%p1), dimensions={1}\n"
        "  ROOT %add.2 = f32[8,3]{1,0} add(%p0, %broadcast.1)\n"
        "}\n")


def test_scalar_literal_becomes_broadcast_constant():
    filecheck(hlo_text(lambda a: mnp.maximum(a, 0.0), np.ones((4,), f32)), """
CHECK: %[[C:constant.*]] = f32[] constant(0.0)
CHECK: %[[B:broadcast.*]] = f32[4]{0} broadcast(%[[C]]), dimensions={}
CHECK: ROOT {{.*}} maximum(%p0, %[[B]])
""")


def test_reduce_has_region_and_init():
    filecheck(hlo_text(lambda a: mnp.max(a, axis=0), np.ones((4, 5), f32)), """
CHECK: %region_maximum
CHECK: ROOT %maximum.{{.*}} = f32[] maximum
CHECK: ENTRY
CHECK: constant(-inf)
CHECK: ROOT {{.*}} = f32[5]{0} reduce(%p0, %constant{{.*}}), dimensions={0}, to_apply=%region_maximum
""")


def test_dot_and_conv_attributes():
    filecheck(hlo_text(lambda a, b: a @ b, np.ones((2, 3), f32), np.ones((3, 4), f32)), """
CHECK: f32[2,4]{1,0} dot(%p0, %p1), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
""")
    conv = lambda x, w: lax.conv_general_dilated(x, w, (2, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    filecheck(hlo_text(conv, np.ones((1, 5, 5, 2), f32), np.ones((3, 3, 2, 4), f32)), """
CHECK: f32[1,3,5,4]{3,2,1,0} convolution(%p0, %p1), window={size=3x3 stride=2x1 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=1
""")


def test_dim_labels_round_trip():
    for dn in [("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC"), ("NHWC", "OIHW", "NCHW")]:
        cdn = lax.conv_dimension_numbers((1, 2, 3, 4), (1, 2, 3, 4), dn)
        assert parse_dim_labels(conv_dim_labels(cdn, 4)) == cdn
    assert conv_dim_labels(lax.conv_dimension_numbers((1,) * 4, (1,) * 4, ("NCHW", "OIHW", "NCHW")), 4) == "bf01_oi01->bf01"


def test_multiple_outputs_make_a_tuple_root():
    filecheck(hlo_text(lambda a: (a + 1.0, a * 2.0), np.ones(3, f32)), """
CHECK: -> (f32[3], f32[3]) {
CHECK: ROOT %tuple.{{.*}} = (f32[3]{0}, f32[3]{0}) tuple(%add.{{.*}}, %multiply.{{.*}})
""")


def test_integer_pow_lowers_to_multiplies():
    filecheck(hlo_text(lambda a: lax.integer_pow(a, 3), np.ones(3, f32)), """
CHECK: %[[SQ:multiply.*]] = f32[3]{0} multiply(%p0, %p0)
CHECK: multiply(%p0, %[[SQ]])
""")


def test_metadata_records_user_line():
    module = minixla.jit(lambda a: a + 1.0).lower(np.ones(3, f32)).hlo_module
    text = module.to_string(print_metadata=True)
    assert 'op_name="add"' in text and "test_hlo.py" in text


def test_shape_printing():
    assert str(Shape(np.float32, (2, 3))) == "f32[2,3]{1,0}"
    assert str(Shape(np.bool_, ())) == "pred[]"
    assert str(Shape(np.int32, (0,))) == "s32[0]{0}"
    assert Shape(np.float32, (2, 3)).nbytes == 24
