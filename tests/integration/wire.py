"""Protobuf wire bytes written by hand, for models no protobuf library would build:
graphs nested a hundred thousand levels deep through GRAPH attributes.

A message's length prefix must be known before its bytes, and concatenating a growing
buffer level by level would copy O(depth^2) bytes, so every level puts its scalar
fields before the nested one: the file is then the levels' prefixes from the outside
in followed by the innermost message, and the prefixes are computed inside out.
"""


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(field, wire_type):
    return varint((field << 3) | wire_type)


def len_field(field, payload_len):
    """The tag and length prefix of a length-delimited field (payload follows)."""
    return tag(field, 2) + varint(payload_len)


def string_field(field, s):
    b = s.encode()
    return len_field(field, len(b)) + b


def int_field(field, v):
    return tag(field, 0) + varint(v)


def nested_if_model(depth, opset=13):
    """ModelProto bytes: graph -> node If -> attribute then_branch (GRAPH) -> graph ...
    `depth` graphs deep, the innermost one empty."""
    prefixes = []
    inner_len = 0  # length of the current innermost GraphProto
    attr_head = string_field(1, "then_branch") + int_field(20, 5)  # name, type = GRAPH
    node_head = string_field(4, "If")                                # op_type
    for _ in range(depth - 1):
        attr_pre = attr_head + len_field(6, inner_len)     # AttributeProto.g
        attr_len = len(attr_pre) + inner_len
        node_pre = node_head + len_field(5, attr_len)      # NodeProto.attribute
        node_len = len(node_pre) + attr_len
        graph_pre = len_field(1, node_len)                 # GraphProto.node
        inner_len = len(graph_pre) + node_len
        prefixes.append(graph_pre + node_pre + attr_pre)
    opset_import = int_field(2, opset)                     # OperatorSetIdProto.version
    model_pre = (int_field(1, 8)                           # ir_version
                 + len_field(8, len(opset_import)) + opset_import
                 + len_field(7, inner_len))                # ModelProto.graph
    prefixes.append(model_pre)
    return b"".join(reversed(prefixes))
